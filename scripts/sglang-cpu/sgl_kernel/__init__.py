"""specsweep's minimal CPU ``sgl_kernel``: the speculative-decoding ops SGLang 0.5.23 imports on ``--device cpu``.

SGLang 0.5.23 imports these names from ``sgl_kernel`` at module load when it runs on the CPU (``is_cpu()``), and no
CPU build of sgl-kernel is on the package index. This package is not upstream's sgl-kernel: it is written for
specsweep in plain Python/torch, one function per op, each following the semantics of the Triton kernel (or the
documented contract) SGLang ships in the same file for the other devices; ``ops.py`` cites the file and function
each one follows. It registers nothing under ``torch.ops.sgl_kernel``, so SGLang's ``cpu_has_amx_support()`` stays
false and every layer runs its plain-torch path (sglang/srt/utils/common.py, ``_is_intel_amx_backend_available``).

Any other ``sgl_kernel`` name fails loudly with the op's name instead of a bare AttributeError.
"""

from __future__ import annotations

from typing import NoReturn

from sgl_kernel.ops import (
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    build_draft_decode_metadata_cpu,
    build_tree_kernel_efficient_cpu,
    copy_all_layer_kv_cache_cpu,
    fill_accept_out_cache_loc_cpu,
    fill_bonus_tokens_cpu,
    reconstruct_indices_from_tree_mask,
    rotate_input_ids_cpu,
    verify_tree_greedy_cpu,
)

__version__ = "0.5.23+specsweep.cpu.1"

__all__ = [
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "assign_req_to_token_pool_cpu",
    "build_draft_decode_metadata_cpu",
    "build_tree_kernel_efficient_cpu",
    "copy_all_layer_kv_cache_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "reconstruct_indices_from_tree_mask",
    "rotate_input_ids_cpu",
    "verify_tree_greedy_cpu",
]


def __getattr__(name: str) -> NoReturn:
    # `from sgl_kernel import X` of an op this package does not carry lands here (PEP 562). An ImportError (not an
    # AttributeError, which Python would turn into a bare "cannot import name") keeps this message, and SGLang's own
    # `try: from sgl_kernel import X / except ImportError` fallbacks behave as they do without the op.
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(
        f"sgl_kernel.{name} is not implemented by specsweep's CPU sgl_kernel "
        f"(it carries only: {', '.join(__all__)}); this SGLang code path needs upstream sgl-kernel"
    )
