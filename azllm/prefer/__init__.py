"""Preference tuning: the stage after instruction tuning, for a language that has no preference data.

:mod:`.data` reads a user's pairs (TRL's formats, checked) and builds pairs (a reference answer chosen over the SFT
model's own answer; a native answer over a machine-translated one), decontaminated, with each source's share.
:mod:`.train` runs TRL's ``DPOTrainer`` or ``KTOTrainer`` on the SFT path's pieces and judges the result on
held-out pairs (preference accuracy with its standard error).
"""
