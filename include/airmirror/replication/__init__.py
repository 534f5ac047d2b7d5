"""One micro-batch of a flow: options, plan, the four-step pipeline, status, and the Spark copy job."""
