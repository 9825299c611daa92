"""caseledger read side: pure folds over the event log."""
