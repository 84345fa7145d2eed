"""The discovery paper's artefacts (Section 6): Table 1 (:mod:`.table1`, hybrid vs finite
objectives), the lifting comparison of Fig. 2(c) (:mod:`.lifting`) and the learned transformer
action (:mod:`.transformer`)."""
