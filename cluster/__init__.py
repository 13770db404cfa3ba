"""Running stages elsewhere: one stage on SLURM (``cluster.submit``), many runs of a stage
(``cluster.sweep``), and a tiny job that checks a distributed strategy works (``cluster.probe``).

Everything here runs the stage's own entry point (``python -m <stage>.train ...``) unchanged; the
cluster adds resources and run names, never a second way of configuring a stage.
"""
