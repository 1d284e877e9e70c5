"""The workshop lesson's pure side: what a step is and reads (`step`), its questions and the score (`question`),
its claims (`claim`), the recorded runs behind it (`recordings`) and the trees step's numbers (`tree_costs`).

Each step itself (its text, question, claim and view) is one file in specviz/app/lesson/steps/.
"""
