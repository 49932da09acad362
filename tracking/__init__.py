"""Candidates from an MLflow tracking server, and a run's decision written
back to it (issue 23): the connection of a study, the import of runs as
candidates with their metrics and prediction artifacts, and the publication
of a succeeded run's ranking as tags."""
