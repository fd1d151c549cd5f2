"""bench/: benchmarks, each runnable alone and through run_all.py; JSON out, PNG plots.

May import anything in the project. Figures are medians of runs, with min/max and the
target; never asserted by timed unit tests.
"""
