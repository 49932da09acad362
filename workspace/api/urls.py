from django.urls import path

from . import discussion, history, rounds, views
from . import invitations as inv

urlpatterns = [
    path("auth/token/", views.TokenCreateView.as_view(), name="token-create"),
    path("auth/tokens/", views.TokenListView.as_view(), name="token-list"),
    path("auth/tokens/<int:token_id>/", views.TokenDetailView.as_view(), name="token-detail"),
    path("studies/", views.StudyListView.as_view(), name="study-list"),
    path("studies/import/", views.StudyImportView.as_view(), name="study-import"),
    path("studies/<int:study_id>/", views.StudyDetailView.as_view(), name="study-detail"),
    path("studies/<int:study_id>/version/", views.StudyVersionView.as_view(), name="study-version"),
    path("studies/<int:study_id>/export/", views.StudyExportView.as_view(), name="study-export"),
    path("studies/<int:study_id>/copy/", views.StudyCopyView.as_view(), name="study-copy"),
    path("studies/<int:study_id>/transitions/", views.StudyTransitionView.as_view(), name="study-transitions"),
    path("studies/<int:study_id>/members/", views.MemberListView.as_view(), name="member-list"),
    path("studies/<int:study_id>/members/<str:username>/", views.MemberDetailView.as_view(), name="member-detail"),
    path(
        "studies/<int:study_id>/members/<str:username>/absence/",
        views.MemberAbsenceView.as_view(),
        name="member-absence",
    ),
    path("studies/<int:study_id>/invitations/", inv.StudyInvitationListView.as_view(), name="study-invitation-list"),
    path(
        "studies/<int:study_id>/invitations/<int:pk>/",
        inv.StudyInvitationDetailView.as_view(),
        name="study-invitation-detail",
    ),
    path("studies/<int:study_id>/attributes/", views.AttributeListView.as_view(), name="attribute-list"),
    path("studies/<int:study_id>/attributes/<int:pk>/", views.AttributeDetailView.as_view(), name="attribute-detail"),
    path("studies/<int:study_id>/metrics/", views.MetricListView.as_view(), name="metric-list"),
    path("studies/<int:study_id>/metrics/<int:pk>/", views.MetricDetailView.as_view(), name="metric-detail"),
    path("studies/<int:study_id>/candidates/", views.CandidateListView.as_view(), name="candidate-list"),
    path("studies/<int:study_id>/candidates/<int:pk>/", views.CandidateDetailView.as_view(), name="candidate-detail"),
    path("studies/<int:study_id>/measurements/", views.MeasurementView.as_view(), name="measurements"),
    path("studies/<int:study_id>/my/votes/", views.MyVotesView.as_view(), name="my-votes"),
    path("studies/<int:study_id>/my/priorities/", views.MyPrioritiesView.as_view(), name="my-priorities"),
    path("studies/<int:study_id>/my/ranges/", views.MyRangesView.as_view(), name="my-ranges"),
    path(
        "studies/<int:study_id>/my/ranges/to-confirm/",
        views.MyRangesToConfirmView.as_view(),
        name="my-ranges-to-confirm",
    ),
    path("studies/<int:study_id>/my/peer-weights/", views.MyPeerWeightsView.as_view(), name="my-peer-weights"),
    path("studies/<int:study_id>/inputs/<str:username>/", views.ExpertInputsView.as_view(), name="expert-inputs"),
    path("studies/<int:study_id>/history/", history.StudyHistoryView.as_view(), name="study-history"),
    # the discussion: a thread per attribute and per metric
    path("studies/<int:study_id>/discussion/", discussion.DiscussionView.as_view(), name="discussion"),
    path(
        "studies/<int:study_id>/discussion/attributes/<int:pk>/",
        discussion.AttributeThreadView.as_view(),
        name="discussion-attribute",
    ),
    path(
        "studies/<int:study_id>/discussion/metrics/<int:pk>/",
        discussion.MetricThreadView.as_view(),
        name="discussion-metric",
    ),
    path(
        "studies/<int:study_id>/discussion/posts/<int:pk>/",
        discussion.PostDetailView.as_view(),
        name="discussion-post",
    ),
    path(
        "studies/<int:study_id>/discussion/posts/<int:pk>/hide/",
        discussion.PostHideView.as_view(),
        name="discussion-hide",
    ),
    path(
        "studies/<int:study_id>/discussion/posts/<int:pk>/unhide/",
        discussion.PostUnhideView.as_view(),
        name="discussion-unhide",
    ),
    # revision rounds
    path("studies/<int:study_id>/rounds/", rounds.RoundListView.as_view(), name="round-list"),
    path("studies/<int:study_id>/rounds/close/", rounds.RoundCloseView.as_view(), name="round-close"),
    path("studies/<int:study_id>/rounds/feedback/", rounds.RoundFeedbackView.as_view(), name="round-feedback"),
    path("studies/<int:study_id>/rounds/<int:number>/", rounds.RoundDetailView.as_view(), name="round-detail"),
    path("invitations/", inv.MyInvitationListView.as_view(), name="invitation-list"),
    path("invitations/accept/", inv.LinkAcceptView.as_view(), name="invitation-accept-link"),
    path("invitations/<int:invitation_id>/accept/", inv.MyInvitationAcceptView.as_view(), name="invitation-accept"),
    path("invitations/<int:invitation_id>/decline/", inv.MyInvitationDeclineView.as_view(), name="invitation-decline"),
]
