"""The cascade's pure rules: how a request is keyed, how a turn's steps become a plan with holes, and when a plan may stand in for the model."""
