"""The driver's side of the sink: commit, recovery from the log, abort and fencing
(docs/design.md, part 2). :mod:`.protocol` reads top-down: prepare, commit, replay."""
