"""Results store, statistics (t-intervals at few seeds, bootstrap IQM for aggregates), claims, plotting style."""
