"""ctypes access to the pinned llama.cpp: declarations (llama_h), library loading, owning wrappers.

A leaf of the package: only the engine uses it.
"""
