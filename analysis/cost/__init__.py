"""The cost model: FLOPs and bytes of ops, generated kernels and collectives.

One home for costing (every roofline floor in the project starts here):

- `ops`: `op_cost` (one ATen/custom op from its recorded arguments) and `cost_table` (an
  events or units table, once per distinct record); the conventions are in its docstring.
- `base`: the `Cost` value and the recorded-argument accessor; `compute` (GEMM, conv,
  attention), `memory` (elementwise, reductions, softmax, norms) and `movement` (copies,
  gathers, casts, quantisation, optimizers, fills, the zero-work ops) hold the formulas;
  `custom` the serving stacks' custom ops and legacy ATen ops; `joins` costs that
  need a second record; `moe` MoE layers (vllm::moe_forward sized from what it nests, fused
  experts, grouped GEMM); `graphs` graph-replayed kernels from the ops recorded at capture.
- `kernels`: Inductor's generated kernels, from the fusion map a compiled trace carries, and
  their FLOPs from the post-grad nodes the compiler wrote (`fused_flops`, `with_flops`).
- `comm`: collectives (bytes over the link, latency steps).
"""

from analysis.cost.base import FAMILIES, Cost
from analysis.cost.comm import apply_comm, comm_table
from analysis.cost.kernels import fused_flops, kernel_costs, with_flops, with_kernel_costs
from analysis.cost.ops import COST_COLUMNS, causal_pairs, cost_table, known_ops, op_cost

__all__ = [
    "COST_COLUMNS",
    "FAMILIES",
    "Cost",
    "apply_comm",
    "causal_pairs",
    "comm_table",
    "cost_table",
    "fused_flops",
    "kernel_costs",
    "known_ops",
    "op_cost",
    "with_flops",
    "with_kernel_costs",
]
