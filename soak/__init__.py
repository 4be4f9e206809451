"""`make soak`: an emulated Auto Scaling instance refresh of a whole node group,
every node drained by the real handler, measured against the pace the budgets and
shutdowns allow, with invariants checked from an independent watch and a timeline
drawn as a PNG. Never shipped in the Lambda zip."""
