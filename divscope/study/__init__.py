"""`divscope quickstart`: the whole study, every command in turn, on the lab models.

`quickstart.quickstart` runs `generate`, `grade`, `score`, `calibrate`, `cross-sample`,
`analyze`, `plot` and `report` as library calls, stage by stage, into one directory that it
resumes (`divscope.quickstart`).
"""
