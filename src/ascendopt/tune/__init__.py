"""The tunable space of a bundled kernel as the UB model sees it (``space``) and the search over it
(``search``)."""
