"""Models: backbones, embedder, neighbour attention, Attn-KNN, the CNN baseline, and the training losses."""

from attnknn_lib.models.backbones import BACKBONES, MLP, ResNet18CIFAR, SmallCNN, build_backbone
from attnknn_lib.models.classifiers import AttnKNN, AttnKNNOutput, CNNClassifier, attend, weighted_vote
from attnknn_lib.models.embedder import Embedder, ProjectionHead
from attnknn_lib.models.neighbour_attention import AttentionConfig, MultiHeadNeighbourAttention


def build_attnknn(backbone: str, input_shape: tuple[int, ...], attention: AttentionConfig,
                  pretrained: bool = False, head_hidden: int = 256, **backbone_kwargs) -> AttnKNN:
    """Attn-KNN with backbone ``backbone`` and an embedding of ``attention.embed_dim`` dimensions."""
    net = build_backbone(backbone, input_shape, pretrained=pretrained, **backbone_kwargs)
    return AttnKNN(Embedder(net, attention.embed_dim, head_hidden), MultiHeadNeighbourAttention(attention))


def build_cnn(backbone: str, input_shape: tuple[int, ...], num_classes: int, pretrained: bool = False,
              **backbone_kwargs) -> CNNClassifier:
    """The classifier baseline with the same backbone as Attn-KNN."""
    return CNNClassifier(build_backbone(backbone, input_shape, pretrained=pretrained, **backbone_kwargs), num_classes)


__all__ = ["AttentionConfig", "MultiHeadNeighbourAttention", "BACKBONES", "MLP", "ResNet18CIFAR", "SmallCNN",
           "build_backbone", "AttnKNN", "AttnKNNOutput", "attend", "CNNClassifier", "weighted_vote", "Embedder", "ProjectionHead",
           "build_attnknn", "build_cnn"]
