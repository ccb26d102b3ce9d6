"""Results store, statistics (bootstrap CIs, IQM, paired differences), claims, plotting style."""
