"""Images on the GPU: the same request through a projector on the CPU and on CUDA (the text model too)
gives the same prompt tokens, and greedy tokens equal up to a near tie (top-2 margin printed)."""
import time

import numpy as np

from llamact import LlamaEngine, ModelParams, image_part
from llamact.models import smollm2_path
from llamact.parity.projectors import write_projector

mmproj = write_projector("/tmp/mmproj.gguf", 576, "mlp", image_size=112)
pixels = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)
messages = [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, image_part(pixels)]}]
answers = {}
for name, ngl, offload in (("cpu", 0, False), ("cuda", -1, True)):
    with LlamaEngine.load(smollm2_path(), ModelParams(n_ctx=2048, n_gpu_layers=ngl, mmproj=mmproj,
                                                      mmproj_offload=offload)) as engine:
        engine.complete_chat(messages, max_tokens=1, temperature=0, cache_prompt=False)   # warm
        t = time.perf_counter()
        reply = engine.complete_chat(messages, max_tokens=24, temperature=0, cache_prompt=False, logprobs=True,
                                     top_logprobs=2)
        answers[name] = (reply, time.perf_counter() - t)
        print(f"{name}: prompt {reply.usage.prompt_tokens} tokens, {reply.usage.completion_tokens} generated in "
              f"{answers[name][1] * 1000:.0f} ms (image + prompt {reply.timings.prompt_ms:.1f} ms)")
cpu, cuda = answers["cpu"][0], answers["cuda"][0]
a = [e.token for e in cpu.logprobs or []]
b = [e.token for e in cuda.logprobs or []]
print("prompt tokens equal:", cpu.usage.prompt_tokens == cuda.usage.prompt_tokens)
first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
if first is None:
    print(f"greedy tokens equal: {len(a)} of {len(a)}")
else:
    top = (cpu.logprobs or [])[first].top_logprobs
    margin = top[0].logprob - top[1].logprob if len(top) > 1 else float("nan")
    print(f"greedy tokens part at {first} of {len(a)}; the CPU's top-2 margin there {margin:.3f}")
