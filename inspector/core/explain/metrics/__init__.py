"""Faithfulness metrics: how far a map (a CAM, an input attribution) says what the model does.

    names.py        the metrics by name, their options (MetricOptions) and protocol texts
    scores.py       the explained score of a perturbed batch: a class probability, a
                    detection's score, a segmentation class's probability
    forwards.py     perturbed inputs through the model in bounded batches, with progress
    curves.py       deletion and insertion (RISE), their baselines, ranks and AUCs
    confidence.py   Average Drop and Increase in Confidence (Grad-CAM++)
    imputation.py   ROAD's noisy linear imputation (a sparse solve, matrix-free)
    road.py         ROAD, most- and least-relevant-first (Rong et al. 2022)
    pointing.py     the pointing game and the energy-based pointing game
    similarity.py   Spearman rank correlation and SSIM of two maps
    sanity.py       cascading randomisation of a copy of the model (Adebayo et al. 2018)
    sanity_maps.py  how the sanity check makes the maps again on the randomised copy
    maps.py         the map scored for a CAM and for an attribution; constant maps
    results.py      one map's scores (MapScores), as the JSON of analyse writes them
    score_maps.py   every metric asked for, for every map of one image, a map at a time
    ranking.py      which method each metric ranks best, and whether they disagree

Import each name from the module that defines it.
"""
