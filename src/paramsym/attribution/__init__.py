"""Parameter-level attribution of function-space symmetry ([Attribution]).

Which parameters carry a symmetry of the learned function, can the parametrisation move along
it (the lifting criterion ``Im η ⊆ Im J``), and how to move toward exact equivariance.

Objects:

* a function of parameters ``f(params, x) -> [N, dimY]`` (:func:`function_from_module` builds it
  from any ``nn.Module`` and a selection of trainable names);
* its Jacobian on a probe set, dense (:func:`dense_jacobian`) or matrix-free
  (:class:`JacobianOperator`);
* a group acting on functions (:class:`FunctionGroup`: :func:`so2`, :func:`o2`, :func:`cyclic`,
  :func:`dihedral`, :func:`finite_group`, :func:`lie_group`) with the orbit tangent
  (:func:`orbit_tangent`), Reynolds projection (:func:`reynolds`) and defect
  (:func:`equivariance_defect`);
* lifts ``c* = J⁺η``, ``b* = J⁺(−δ)`` (:func:`lift`, :class:`DenseLift`,
  :func:`lift_matrix_free`) with residuals, resolved rank, gauge and dead columns;
* flows along them (:func:`run_flow`) with exact function-space predictions;
* per-parameter and per-tensor tables (:mod:`paramsym.attribution.tables`).

One call for any module: :func:`attribute`.
"""

from .flows import (
    DIRECTIONS,
    FLOW_MODES,
    FlowRecord,
    FlowTrace,
    LiftRecord,
    angular_profile,
    flow_record,
    phase_shift,
    predicted_function,
    predicted_profile,
    rms,
    run_flow,
)
from .jacobian import (
    JacobianOperator,
    ParamFunction,
    ParamLayout,
    check_outputs,
    check_probes,
    dense_jacobian,
    finite_difference_matvec,
    function_from_module,
)
from .lift import (
    DEAD_TOL,
    LIFT_TOL,
    RTOL,
    DenseLift,
    LiftResult,
    StackedOperator,
    lift,
    stack_rows,
)
from .matrix_free import largest_singular_value, lift_matrix_free
from .problem import Attribution, SymmetryProblem, attribute
from .symmetry import (
    OMEGA,
    FunctionGroup,
    ProbeSetWarning,
    cyclic,
    dihedral,
    equivariance_defect,
    equivariance_error_x,
    finite_group,
    lie_group,
    o2,
    orbit_tangent,
    orbit_tangent_x,
    polar_grid,
    probe_leak,
    reynolds,
    reynolds_x,
    rotation,
    so2,
    transform_x,
)

__all__ = [
    "Attribution", "DEAD_TOL", "DIRECTIONS", "DenseLift", "FLOW_MODES", "FlowRecord", "FlowTrace",
    "FunctionGroup", "JacobianOperator", "LIFT_TOL", "LiftRecord", "LiftResult", "OMEGA",
    "ParamFunction", "ParamLayout", "ProbeSetWarning", "RTOL",
    "StackedOperator", "SymmetryProblem", "angular_profile", "attribute", "check_outputs",
    "check_probes", "cyclic", "dense_jacobian", "dihedral", "equivariance_defect",
    "equivariance_error_x", "finite_difference_matvec", "finite_group", "flow_record",
    "function_from_module", "largest_singular_value", "lie_group", "lift",
    "lift_matrix_free", "o2", "orbit_tangent", "orbit_tangent_x", "polar_grid",
    "phase_shift", "predicted_function", "predicted_profile", "probe_leak", "reynolds", "reynolds_x", "rms", "rotation", "run_flow",
    "so2", "stack_rows", "transform_x",
]
