"""vLLM 0.30's CPU build without Triton: its speculative-decoding sampler kernels, made to run.

vLLM 0.30 wraps the rejection sampler's Triton kernels in warm-up dispatchers that hold the kernel
they were built with, while its CPU model runner still swaps in its C++ fallbacks by rebinding the
module's names, which those dispatchers never read: n-gram drafting then dies in the first verify step
("Cannot inspect kernel parameters for function"). vLLM 0.32 registers the fallbacks with the
dispatchers (``CpuPlatform.register_triton_kernel_overrides``); here, for builds without that, each
dispatcher is given vLLM's own C++ fallback. :func:`leanloop.vllm_engine.start_engine` names
:class:`CPUSamplerKernels` as the engine's ``worker_extension_cls``, so vLLM imports this module in
every worker process (the one hook there), and the import applies the fix.
"""

from __future__ import annotations

# dispatcher in vllm.v1.sample.rejection_sampler -> its fallback in vllm.utils.cpu_triton_utils
FALLBACKS = {
    "_rejection_greedy_sample": "rejection_greedy_sample_kernel",
    "_rejection_random_sample": "rejection_random_sample_kernel",
    "_expand": "expand_kernel",
    "_sample_recovered_tokens": "sample_recovered_tokens_kernel",
}


def needed() -> bool:
    """Whether this vLLM is a CPU build, without Triton, whose platform does not register the fallbacks."""
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    return (
        current_platform.is_cpu()
        and not HAS_TRITON
        and not hasattr(type(current_platform), "register_triton_kernel_overrides")
    )


def apply() -> None:
    import vllm.v1.sample.rejection_sampler as sampler
    from vllm.utils import cpu_triton_utils

    for dispatcher, fallback in FALLBACKS.items():
        getattr(sampler, dispatcher).kernel = getattr(cpu_triton_utils, fallback)


class CPUSamplerKernels:
    """The worker extension whose import (by vLLM, in each worker) applies the fix; it adds no methods."""


if needed():
    apply()
