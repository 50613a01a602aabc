"""Runtimes beside llama.cpp, each behind ``LlamaEngine``'s surface (optional extras).

``litert``: Google's LiteRT-LM for ``.litertlm`` bundles (``pip install llamact[litert]``). A
backend is a leaf under the engine, as ``native`` is: ``engine`` uses it, and it uses only
``chat`` (templates, requests), ``grammar`` and ``errors`` -- never the engine, the session or the
server.
"""
