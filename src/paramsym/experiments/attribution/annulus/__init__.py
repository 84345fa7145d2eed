"""The annulus experiment: the protocol (:mod:`.protocol`), the run (:mod:`.run`) and its report (:mod:`.report`)."""
