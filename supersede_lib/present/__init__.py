"""Figures (matplotlib/seaborn) and the notebooks' interactive episode explorer."""
