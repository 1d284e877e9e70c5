"""The measurement worker: one process per server that owns the timed models (`process`), and the jobs it runs
(`jobs`: the lab's measurements, the lesson's recordings, distillation). It stands above the lab, the lesson and
training, which it calls; the app's service is its only client."""
