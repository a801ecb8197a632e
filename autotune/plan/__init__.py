"""Plan before renting: predict a training step's memory, time and cost on GPUs it never ran on."""
