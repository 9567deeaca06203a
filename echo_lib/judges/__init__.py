"""Judges under test: the sensitivity set and the figures that say whether a judge sees the reply (issue 16).

    sensitivity_set   the YAML set of items (a chat, a good reply, a poor reply of a named kind) and its checks
    sensitivity       preference accuracy of the sandbox judge; accuracy, alpha, position bias of the NEE panel
    stage             the stage for a run config -> results/<run>/judges/sensitivity.json and a figure
"""
