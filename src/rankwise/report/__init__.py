"""Reports: paired significance tests over per-query values, and PNG plots."""
from rankwise.report.significance import (
    ComparisonTable,
    compare_systems,
    holm_correction,
    paired_randomization_test,
    paired_t_test,
    win_tie_loss,
)

__all__ = ["ComparisonTable", "compare_systems", "holm_correction", "paired_randomization_test",
           "paired_t_test", "win_tie_loss"]
