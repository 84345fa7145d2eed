"""Reference networks of the papers (small MLPs, students/teachers, Hamiltonian networks),
offline datasets, registries describing the weight layout of pretrained architectures
(:mod:`.adapters`) and the one model loader (:mod:`.loading`: safetensors only, offline).

Importing this package imports torch but never ``transformers`` (loaded by the functions that
need it). The MLP builder is ``paramsym.models.mlp.mlp`` (not re-exported: its name is its
module's)."""

from .adapters import (
    AttentionLayout,
    FFNLayout,
    LayerLayout,
    ModelLayout,
    Projection,
    adapt,
    ffn_activation,
    known_model_types,
    mha_layout,
    register_adapter,
    require_eager,
)
from .datasets import Split, digits, modular_addition
from .hamiltonian import SeparableHamiltonian, generate_trajectories, train_hamiltonian
from .loading import load_minilm, load_model, load_tokenizer, resolve_model_path
from .mlp import activation_module, layer_names, parameter_count
from .reference import attention_layer, reference_mlp, teacher_student

__all__ = [
    "AttentionLayout", "FFNLayout", "LayerLayout", "ModelLayout", "Projection", "SeparableHamiltonian", "Split",
    "activation_module", "adapt", "attention_layer", "digits", "ffn_activation", "generate_trajectories",
    "known_model_types", "layer_names", "load_minilm", "load_model", "load_tokenizer", "mha_layout",
    "modular_addition", "parameter_count", "reference_mlp", "register_adapter", "require_eager",
    "resolve_model_path", "teacher_student", "train_hamiltonian",
]
