"""How the native libraries are loaded: each one exactly once, privately (RTLD_LOCAL), and every log
line, mtmd's included, routed to Python's ``logging`` instead of the terminal.

Loaded once: a wheel holds ``libmtmd.so`` and ``libmtmd.so.0`` as two files (a zip has no symlinks);
loading one by path after the shim pulled in the other mapped a second copy, whose logger the log
router then set while the first copy printed to stderr. Privately: with RTLD_GLOBAL the backends that
libggml pulls in came first in the process's global scope, and libllama's own copies of C++ template
code bound to libggml-cuda's, which crashed every model load of a CUDA build (issue 23's device run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_process import lines_of, run_child

pytestmark = [pytest.mark.model]

CHILD = """
import collections, logging, re, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger("llamact.native").addHandler(Keep())
logging.getLogger("llamact.native").setLevel(logging.DEBUG)
from llamact.native._library import native
from llamact.native.model import Model
from llamact.native.mtmd import Projector
from llamact.models import smollm2_path
native()
model = Model(smollm2_path())
Projector(model, sys.argv[1]).close()
maps = open("/proc/self/maps").read()
names = collections.Counter()
for path in set(re.findall(r"/\\S*/_lib/(lib\\S+?\\.so)(?:\\.\\d+)*\\b", maps)):
    names[path] += 1
files = collections.Counter(re.sub(r"\\.so(\\.\\d+)*$", "", p.rsplit("/", 1)[1])
                            for p in set(re.findall(r"/\\S*/_lib/lib\\S+", maps)))
for name, count in sorted(files.items()):
    print("LIB", name, count)
print("LOGGED", sum("clip_model_loader" in r for r in records))
"""


def test_each_library_once_and_every_log_line_routed(tmp_path: Path) -> None:
    from llamact.parity.projectors import write_projector

    mmproj = write_projector(tmp_path / "mmproj.gguf", 576)
    proc = run_child(CHILD, str(mmproj), cwd=tmp_path)
    libs = dict(line.split() for line in lines_of(proc, "LIB"))
    assert {"libllama", "libggml", "libggml-base", "libmtmd", "libllamact-shim"} <= set(libs)
    assert all(count == "1" for count in libs.values()), libs
    assert int(lines_of(proc, "LOGGED")[0]) > 0          # mtmd's loader lines reached logging
    assert "clip_model_loader" not in proc.stderr          # and none went to the terminal
