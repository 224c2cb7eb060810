"""Studies: a grid of runs from one spec, executed, resumed and tabulated.

:mod:`.spec` (the study file, presets, run ids), :mod:`.run_study` (plan, skip finished runs,
execute, rebuild the table), :mod:`.executors` (sequential, a process pool, Ray), :mod:`.run_one`
(one run: train then evaluate), :mod:`.baseline` (the untrained student), :mod:`.table`
(``results.parquet``) and :mod:`.lock` (one study process per directory). Planning a study imports
no torch; :mod:`.run_one` does, so the package re-exports nothing: a name is imported from its
module.
"""
