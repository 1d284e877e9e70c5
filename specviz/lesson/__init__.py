"""The workshop lesson: its steps and questions (`steps`) and the recorded runs behind them (`recordings`)."""
