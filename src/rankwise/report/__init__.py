"""Reports: paired significance tests over per-query values, and PNG plots."""
from rankwise.report.significance import (
    CORRECTIONS,
    ComparisonTable,
    benjamini_hochberg,
    bonferroni_correction,
    bootstrap_ci,
    cohens_dz,
    compare_systems,
    holm_correction,
    paired_randomization_test,
    paired_t_test,
    tukey_hsd_randomized,
    win_tie_loss,
)

__all__ = ["CORRECTIONS", "ComparisonTable", "benjamini_hochberg", "bonferroni_correction", "bootstrap_ci",
           "cohens_dz", "compare_systems", "holm_correction", "paired_randomization_test", "paired_t_test",
           "tukey_hsd_randomized", "win_tie_loss"]
