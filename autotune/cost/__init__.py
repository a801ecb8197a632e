"""Cost: prices per GPU-hour and what a run's throughput costs."""
