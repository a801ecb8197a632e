"""The commands' options, built at every start-up and kept light: each command loads only when run."""
