from rankwise.models.base import BaseRanker
