"""Models out: a fitted ranker written for a search engine, with the engine's scoring checked here.

- :func:`tree_ensemble`: the neutral form of a LightGBM / XGBoost booster (thresholds, decision
  rule, missing-value rule, leaves, base margin) and its reference scorer (``_trees``);
- :func:`to_opensearch`: the OpenSearch / Elasticsearch LTR plugin's ``model/xgboost+json``,
  ``model/ranklib`` and ``model/linear`` (``opensearch``);
- :func:`to_solr`: Solr LTR's ``LinearModel`` and ``MultipleAdditiveTreesModel`` (``solr``);
- :func:`to_elasticsearch`: Elasticsearch's native ``learning_to_rank`` trained-model trees (``elasticsearch``);
- :func:`to_vespa`: Vespa's ``lightgbm()``/``xgboost()`` model files, linear expressions, ONNX models and
  the rank profile (``vespa``);
- :func:`to_onnx`: ONNX graphs run by onnxruntime (``onnx``; onnx/onnxruntime imported when called);
- :mod:`rankwise.export.reference`: each engine's parser and scorer restated (no engine runs here);
- :func:`parity_report`: the served scores against ``predict`` (``parity``).

See docs/serving.md.
"""
from rankwise.export._trees import TreeEnsemble, adversarial_rows, tree_ensemble
from rankwise.export._common import ExportError
from rankwise.export.opensearch import OpenSearchExport, featureset_body, to_opensearch
from rankwise.export.parity import ParityReport, compare_scores, parity_report
from rankwise.export.solr import SolrExport, to_solr
from rankwise.export.elasticsearch import ElasticsearchExport, to_elasticsearch
from rankwise.export.vespa import VespaExport, to_vespa
from rankwise.export.onnx import OnnxExport, to_onnx

__all__ = ["TreeEnsemble", "tree_ensemble", "adversarial_rows", "ExportError", "OpenSearchExport", "to_opensearch",
           "featureset_body", "ParityReport", "parity_report", "compare_scores", "SolrExport", "to_solr",
           "ElasticsearchExport", "to_elasticsearch", "VespaExport", "to_vespa", "OnnxExport", "to_onnx"]
