"""SCALE-Sim's report folder (COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv, DETAILED_ACCESS_REPORT.csv)
as a `Trace`: `load_scalesim(folder)`; `is_scalesim(path)` says whether a path is one."""

from collectors.scalesim.read import COMPUTE, is_scalesim, load_scalesim

__all__ = ["COMPUTE", "is_scalesim", "load_scalesim"]
