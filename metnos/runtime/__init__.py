"""The turn loop and its rules, the cascade, the scheduler, synt, skills, the mnestome."""
