"""The attribution paper's artefacts: the annulus (:mod:`.annulus`), the Hamiltonian system
(:mod:`.hamiltonian`) and the lifting sanity check (:mod:`.sanity`); their presets
(:mod:`.presets`) and what every attribution preset writes (:mod:`.records`)."""
