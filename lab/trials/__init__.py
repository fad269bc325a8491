"""The methods' trials: each method against its paper's controls and ablations, on datasets."""
