"""Stage 06, the NEE judge panel (METHOD.md 7): blinded, order-randomised LLM judges rate every sandbox
transcript on six Likert dimensions and compare each model with a reference pairwise in both orders;
Krippendorff's alpha between judges; the 0-100 NEE score and the composite with EPM-Q.

    dimensions  the six dimensions and their anchored 1-5 levels
    blinding    transcripts -> what a judge may see (names masked, formatting normalised)
    order       each judge's seeded, recorded presentation order
    prompts     three wordings of the judge prompts; strict JSON parsers
    panel       judges (model x wording x seed) and how they answer (choose or JSON mode)
    agreement   Krippendorff's alpha (nominal, ordinal, interval, ratio)
    scores      0-100 rescale, intervals (echo_lib.stats), paired differences, composite, win and position-bias rates
    stage       the whole stage -> results/<run>/nee/

Nothing is imported here: echo_lib.config imports echo_lib.nee.params, so this package stays light.
"""
