"""The Hamiltonian experiment: configuration (:mod:`.config`), training (:mod:`.train`), the run (:mod:`.run`) and its report (:mod:`.report`)."""
