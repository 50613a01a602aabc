"""Parity with upstream llama.cpp, measured: a client for the oracle program (tests/oracle), which
answers with upstream's own code built from the vendored pin. See ``llamact.parity.oracle``."""
