TRAIN_DATASETS = ("nq", "triviaqa")  # the sets whose dev split trains; their test split only measures
