"""``sgl_kernel.speculative``: the module path sglang/kernels/ops/speculative/reconstruct_tree.py imports from."""

from sgl_kernel.ops import reconstruct_indices_from_tree_mask

__all__ = ["reconstruct_indices_from_tree_mask"]
