"""Figure builders: DataFrames in (dashboard.tables, dashboard.timeline_data), plotly Figure out.

Pure functions: no server, no I/O, no global state, so they are tested on their own
(tests/test_dashboard_figures.py). Colours are fixed per bound so every page agrees. One file
per chart family: roofline, overview (wall equation, MFU per step), timeline, and the charts of
the other pages.
"""

from dashboard.figures.common import BOUND_COLORS, PART_COLORS, _empty
from dashboard.figures.overview import equation_figure, iterations_figure
from dashboard.figures.pages import PHASE_COLORS, compare_figure, compile_phases_figure, llm_steps_figure, memory_figure
from dashboard.figures.roofline import ABOVE_CEILING, MEMORY_DASH, roofline_figure
from dashboard.figures.timeline import timeline_figure

__all__ = [
    "ABOVE_CEILING",
    "BOUND_COLORS",
    "MEMORY_DASH",
    "PART_COLORS",
    "PHASE_COLORS",
    "_empty",
    "compare_figure",
    "compile_phases_figure",
    "equation_figure",
    "iterations_figure",
    "llm_steps_figure",
    "memory_figure",
    "roofline_figure",
    "timeline_figure",
]
