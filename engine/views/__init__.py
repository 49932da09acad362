"""The run, results and robustness pages (docs/pages.md): a study's runs,
one run's ranking and explanations, comparisons, robustness analyses."""
