"""What the CPU backend was compiled with: ggml's AMX kernels are left out unless the build asked
for them (-DLLAMACT_CPU_AMX=ON), since they crash on some machines (docs/design.md, "The native
build")."""

from __future__ import annotations

import llamact
from llamact.native._library import native


def test_the_cpu_backend_has_no_amx_kernels_unless_the_build_asked() -> None:
    features = native().llama.llama_print_system_info().decode()
    assert "CPU :" in features, features   # the CPU backend reports its features here
    asked = llamact.build_info().get("cpu_amx", "OFF").upper() in ("ON", "TRUE", "1")
    if not asked:
        assert "AMX_INT8 = 1" not in features, features
