"""Reference networks of the papers (small MLPs, students/teachers, Hamiltonian networks) and
registries describing the weight layout of pretrained architectures."""
